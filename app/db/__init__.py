"""Storage: tables (models.py), engine and sessions (session.py), queries that
never commit (queries.py), and migrations to head (migrate.py)."""
