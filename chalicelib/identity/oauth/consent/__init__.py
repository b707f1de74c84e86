"""Consent for third-party OAuth clients: what a user allowed which client (``grants``), the authorization
requests waiting on the consent page (``pending``), and the user's answer (``decision``).

A client that is not first-party (``oauth/clients.is_first_party``) gets a code only after the user allowed
it that workspace, scope set and resource; the web app and other first-party clients never ask."""
