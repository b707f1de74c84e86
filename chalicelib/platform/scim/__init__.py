"""SCIM 2.0 provisioning (RFC 7643 and 7644) of a workspace's users and groups by its identity provider."""
