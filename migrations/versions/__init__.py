"""Alembic revision files (a package so that they ship in the wheel)."""
