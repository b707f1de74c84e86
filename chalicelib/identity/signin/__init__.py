"""Signing in: password, e-mailed codes, reset links, lockout, browser sessions and safe redirects."""
