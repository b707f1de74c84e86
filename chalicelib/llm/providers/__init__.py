"""Model providers, one module each: Amazon Bedrock (Converse), any OpenAI-compatible endpoint, and the
built-in extractive provider. The registry (``llm/registry.py``) declares which models each serves, where."""
