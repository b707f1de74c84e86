"""OAuth 2.0 / OpenID Connect provider: endpoints, one module per grant (``grants``), clients, signing, revocation."""
