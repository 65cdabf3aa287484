"""The dashboard's Starlette application: routes for the pages (gpuplan.ui.pages) and the JSON API
(gpuplan.ui.api), static files from the package, behind the security gate (gpuplan.ui.security)."""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from gpuplan.ui import api, pages
from gpuplan.ui.security import SecurityMiddleware
from gpuplan.ui.settings import UiSettings

HERE = Path(__file__).parent


def build_app(settings: UiSettings) -> Starlette:
    routes = [
        Route("/", pages.home),
        Route("/runs", pages.runs_page),
        Route("/runs/{run_id}", pages.run_page),
        Route("/runs/{run_id}/stop", pages.stop_page, methods=["GET", "POST"]),
        Route("/launch", pages.launch_page, methods=["GET", "POST"]),
        Route("/books", pages.books_page),
        Route("/accuracy", pages.accuracy_page),
        Route("/plan", pages.plan_page),
        Route("/api/runs", api.runs),
        Route("/api/runs/{run_id}", api.run),
        Route("/api/report", api.report),
        Route("/api/books", api.books),
        Route("/api/budgets", api.budgets),
        Route("/api/accuracy", api.accuracy),
        Route("/api/plan", api.plan),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(SecurityMiddleware, guard=settings.guard)],
                    exception_handlers=pages.EXCEPTION_HANDLERS)
    app.state.settings = settings
    app.state.templates = pages.environment()
    return app
