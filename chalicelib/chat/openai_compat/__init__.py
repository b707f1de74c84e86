"""An OpenAI-compatible surface on the platform API: ``POST /v1/chat/completions`` over the grounded chat
(``translate`` holds the shapes, ``routes`` the route); ``GET /v1/models`` answers in both shapes
(``llm.service.available``)."""
