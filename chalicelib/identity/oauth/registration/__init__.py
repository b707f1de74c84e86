"""How OAuth clients come to exist: the redirect URIs a client may register (``redirect_uris``), RFC 7591
dynamic registration (``dynamic``) and Client ID Metadata Documents (``metadata_documents``)."""
