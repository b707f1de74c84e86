"""Hosted HTML pages at {auth_url}: sign-in, reset, account settings, and their static files."""
