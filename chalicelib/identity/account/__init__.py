"""Account settings for a signed-in user: sessions, API tokens, password and second factors."""
