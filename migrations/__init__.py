"""Alembic migrations of the priorwatch schema (a package so that it ships in the wheel)."""
