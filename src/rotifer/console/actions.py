"""The console's changes (POST): verify the audit log, confirm and delete, log out.

Each reads its form and checks the session's CSRF token before anything else
(the guard has checked the Origin).  A deletion carries what its confirmation
showed -- each entry's version (``seq``) for keys, the count and bytes for a
category -- and the store deletes only if that is still so, in the same
transaction (:meth:`DeployerMemory.delete_keys` / ``delete_category`` with
``expect``); else nothing goes and the confirmation is shown again saying what
changed.  Status lines are kept in the session and shown once, never read from
the address.
"""

from __future__ import annotations

import json

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from rotifer.memory import Category, MemoryStore
from rotifer.memory.errors import invalid
from rotifer.memory.views.browse import describe_keys
from rotifer.memory.views.deployer_memory import Changed

from .app import error_text, key_of, link, plural, render
from .data import Verified
from .pages import _category, data_of
from .security import CSRF_FIELD, CSRF_HEADER, Protections, session_of


async def _form(request: Request) -> FormData:
    """The posted form, once its CSRF token is the session's (else 403)."""
    form = await request.form()
    given = request.headers.get(CSRF_HEADER) or form.get(CSRF_FIELD)
    protections: Protections = request.app.state.protections
    if protections.csrf and not session_of(request).csrf_ok(
            given if isinstance(given, str) else None):
        raise HTTPException(403, "Refused: the form's CSRF token is missing or wrong.")
    return form


async def verify(request: Request) -> Response:
    """Verify the agent's audit log.  From htmx the verify starts in a thread of
    its own and the answer is its progress, which asks again (:func:`verifying`)
    until the result is there; without script the answer waits for the result."""
    await _form(request)
    name = request.path_params["name"]
    data = data_of(request)
    if request.headers.get("hx-request") == "true":
        await run_in_threadpool(data.start_verify, name, error_text)
        return verifying(request)

    def check() -> Verified:
        try:
            return data.verify(name)  # on a store of its own: other pages go on
        except Exception as exc:
            return Verified(False, error_text(exc), 0)

    data.verified[name] = await run_in_threadpool(check)
    return render(request, "verified.html", name=name, result=data.verified[name])


def verifying(request: Request) -> Response:
    """The agent's verify as it stands: its progress while it runs (the fragment
    asks again), else its result and the button."""
    name = request.path_params["name"]
    data = data_of(request)
    progress = data.verify_progress(name)
    if progress is not None:
        return render(request, "verifying.html", name=name, done=progress[0],
                      total=progress[1])
    return render(request, "verified.html", name=name, result=data.verified.get(name))


def _selection(form: FormData) -> tuple[str, list[str], Category | None]:
    """What a delete form names: ``mode`` key (one key), keys (a selection) or category."""
    mode = str(form.get("mode") or "")
    if mode == "category":
        return mode, [], _category(str(form.get("category") or ""))
    if mode == "key":
        ref = form.get("ref")  # from the confirmation; a typed key comes as "key"
        key = key_of(ref) if isinstance(ref, str) else str(form.get("key") or "")
        if not key:
            raise invalid("give the key to delete")
        return mode, [key], None
    if mode == "keys":
        keys = [key_of(str(ref)) for ref in form.getlist("ref")]
        if not keys:
            raise invalid("select at least one entry to delete")
        return mode, keys, None
    raise invalid("unknown kind of deletion")


def _confirmation(request: Request, name: str, mode: str, keys: list[str],
                  category: Category | None, changed: str | None = None,
                  status: int = 200) -> Response:
    """The confirmation of what a deletion would remove now, with the versions it
    shows in its form (the deletion checks them)."""
    data = data_of(request)
    if mode == "category":
        assert category is not None
        _, _, usage = data.usage(name)
        count, nbytes = usage[category].count, usage[category].bytes
        infos = []
        expect = json.dumps([count, nbytes])
    else:
        infos = data.run(name, lambda store: describe_keys(store, name, keys))
        count, nbytes = len(infos), sum(e.size for e in infos)
        keys = [e.key for e in infos]
        expect = json.dumps({e.key: e.seq for e in infos}, ensure_ascii=True)
    # In the dialog (htmx) the confirmation alone; as a plain form post, a page.
    template = "confirm.html" if request.headers.get("hx-request") == "true" \
        else "confirm_page.html"
    return render(request, template, status, name=name, mode=mode, keys=keys,
                  category=category, count=count, nbytes=nbytes, infos=infos,
                  expect=expect, changed=changed)


async def confirm(request: Request) -> Response:
    form = await _form(request)
    name = request.path_params["name"]

    def run() -> Response:
        mode, keys, category = _selection(form)
        return _confirmation(request, name, mode, keys, category)
    response: Response = await run_in_threadpool(run)
    return response


async def delete(request: Request) -> Response:
    form = await _form(request)
    name = request.path_params["name"]
    data = data_of(request)

    def remove(store: MemoryStore, mode: str, keys: list[str],
               category: Category | None) -> int:
        deployer = store.deployer(name)  # what `agent memory delete` calls, made exact
        expect = _expected(form)
        if mode == "category" and isinstance(expect, list) and len(expect) == 2 and all(
                isinstance(n, int) for n in expect):
            assert category is not None
            return deployer.delete_category(category, expect=(expect[0], expect[1]))
        if mode != "category" and isinstance(expect, dict) and all(
                isinstance(n, int) for n in expect.values()):
            return deployer.delete_keys(keys, expect=expect)
        raise invalid("a deletion carries what its confirmation showed; confirm it first")

    def run() -> Response:
        mode, keys, category = _selection(form)
        try:
            removed = data.run(name, lambda store: remove(store, mode, keys, category))
        except Changed as exc:
            return _confirmation(request, name, mode, keys, category,
                                 changed=exc.message, status=409)
        session_of(request).flash = f"Removed {plural(removed, 'entry', 'entries')}"
        to = link(request, "agent", name=name)
        if request.headers.get("hx-request") == "true":  # the whole page, not the dialog
            return Response(status_code=200, headers={"hx-redirect": str(to)})
        return RedirectResponse(to, status_code=303)
    response: Response = await run_in_threadpool(run)
    return response


def _expected(form: FormData) -> object:
    text = form.get("expect")
    try:
        return json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None


async def logout(request: Request) -> Response:
    """End the session: its cookie and secret path open nothing from now on."""
    await _form(request)
    session = session_of(request)
    request.app.state.sessions.end(session)
    response = Response("Signed out. To sign in again, open the newest address rotifer "
                        "console printed in its terminal.\n", media_type="text/plain")
    response.delete_cookie(request.app.state.cookie, path=session.root, httponly=True,
                           samesite="strict")
    return response
