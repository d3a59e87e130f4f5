"""An agent's memory for any MCP client (the optional extra ``rotifer[mcp]``).

``rotifer mcp AGENT --as GENE`` serves one agent's memory over the Model
Context Protocol, acting as one of its genes (its v2 id and domain), so quota
and cleanup, access scopes, retention and the audit log hold for what an LLM
writes as they do for that gene's ``ctx.memory``; ``--deployer`` serves the
owner's view (read, list, delete; no writes).  See docs/mcp.md.
"""

from .acting import VIA, Acting, DeployerActing, GeneActing, WritePolicy
from .server import build_server, resource_uri

__all__ = ["VIA", "Acting", "DeployerActing", "GeneActing", "WritePolicy", "build_server",
           "resource_uri"]
