"""The console's Models page endpoints: the configured upstream models, and a probe of one.

``GET /console/api/models`` lists the models the session's key may use, with how each is
configured to take a JSON schema; ``POST /console/api/models/{name}/probe`` runs
``orgate models probe`` on one of them (probe/checks.py) and returns its report: what its
upstream supports, the mode orgate will use and why, and the configuration keys the findings
give (the page shows them to copy; ``orgate models probe --write`` writes them). A probe
sends a few tiny requests, each costing a few tokens: it runs only when a signed-in admin
asks for it, with the CSRF token of a change, never by itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from orgate.console.guard import json_response, require_change_allowed, require_session
from orgate.console.session import ConsoleSession, SessionSigner
from orgate.neutral import Deployment
from orgate.probe.checks import probe
from orgate.protocol.errors import ApiError, ErrorCode, model_not_found
from orgate.providers import ProviderRegistry

if TYPE_CHECKING:
    from orgate.server.services import Services


def _visible(services: Services, session: ConsoleSession) -> dict[str, Deployment]:
    """The upstream models (not the built-in ones) the session's key may use, by name."""
    return {
        name: deployment
        for name, deployment in services.deployments.items()
        if deployment.provider != "builtin"
        and name == deployment.name
        and (session.models is None or name in session.models)
    }


def _summary(deployment: Deployment) -> dict[str, Any]:
    caps = deployment.capabilities
    return {
        "name": deployment.name,
        "provider": deployment.provider,
        "base_url": deployment.base_url,
        "upstream_model": deployment.upstream_model,
        "server": deployment.options.get("server", "auto"),
        "schema_dialects": list(caps.schema_dialects),
        "json_object": caps.json_object,
        "declared": sorted(caps.declared),
    }


async def _probe(deployment: Deployment) -> dict[str, Any]:
    registry = ProviderRegistry()  # its own pool, closed with the probe
    try:
        provider = registry(deployment)
        report = await probe(deployment, provider, registry.pool.session(deployment))
    finally:
        await registry.aclose()
    return report.to_dict(deployment.capabilities)


def model_routes(services: Services, signer: SessionSigner) -> list[BaseRoute]:
    async def listing(request: Request) -> Response:
        session = await require_session(signer, request)
        models = _visible(services, session)
        return json_response({"data": [_summary(d) for d in models.values()]})

    async def run(request: Request) -> Response:
        session = await require_change_allowed(signer, request)
        if not session.admin:  # a probe spends the operator's tokens
            raise ApiError.of(
                ErrorCode.ADMIN_REQUIRED,
                "A probe spends the upstream's tokens: it needs an admin key (admin = "
                "true in [auth]).",
            )
        name = request.path_params["name"]
        deployment = _visible(services, session).get(name)
        if deployment is None:
            raise model_not_found(name)
        return json_response(await _probe(deployment))

    return [
        Route("/console/api/models", listing, methods=["GET"]),
        Route("/console/api/models/{name:path}/probe", run, methods=["POST"]),
    ]
