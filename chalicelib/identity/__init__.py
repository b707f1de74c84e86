"""Identity: sign-in, second factors, the OAuth 2.0 / OIDC provider, SSO, account settings, hosted pages.

Sub-packages: ``oauth`` (endpoints, grants, clients, signing, revocation), ``signin`` (password,
e-mailed codes, reset, lockout, sessions, redirects), ``mfa`` (TOTP, recovery codes, WebAuthn),
``sso`` (connections and the relying-party flow), ``account`` (settings API, API tokens) and
``pages`` (hosted HTML pages). ``models`` holds every PynamoDB model of identity; ``users`` is the
directory every sub-package reads.
"""
