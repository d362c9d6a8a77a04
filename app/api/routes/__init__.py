"""Route modules; :data:`ROUTERS` is what ``create_app`` mounts (add new routers here).

The router tries the routes in this order: the batch route, the busiest by
far, comes first so that a batch is matched without testing every other
route's path pattern before it (no two routes' patterns overlap).
"""

from fastapi import APIRouter

from app.api.routes import batches, evaluate, health, keys, metrics, models, sla, windows

ROUTERS: list[APIRouter] = [
    batches.router,
    health.router,
    models.router,
    keys.router,
    evaluate.router,
    windows.router,
    sla.router,
    metrics.router,
]
