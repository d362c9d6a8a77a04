"""Route modules; :data:`ROUTERS` is what ``create_app`` mounts (add new routers here)."""

from fastapi import APIRouter

from app.api.routes import batches, evaluate, health, keys, metrics, models, sla, windows

ROUTERS: list[APIRouter] = [
    health.router,
    models.router,
    keys.router,
    batches.router,
    evaluate.router,
    windows.router,
    sla.router,
    metrics.router,
]
