"""Use case: register and configure models, and authorise their callers.

The settings and their validation (``settings``, ``retention``), the settings
as the computation sees them (``config``), the registry (``registry``: create,
read, update, delete), API keys (``api_keys``) and the per-process caches of
authorisations and database engines. Every other room reads models through here.
"""
