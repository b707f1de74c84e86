"""Corporate and social single sign-on: connections (``connections``) and the relying-party flow (``flow``)."""
