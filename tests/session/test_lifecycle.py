"""A session from plan to receipt: durable at every step, one receipt, honest outcomes."""

from __future__ import annotations

from glove.cli._journal import read_key_file
from glove.journal import verify

from .conftest import Running, plan


async def test_a_session_runs_to_one_terminal_receipt(service: Running) -> None:
    """create -> ... -> terminal; the receipt names the plan, binding, outcome and output."""
    view = await service.registry.create(plan("hello"))
    assert view.state == "created"
    final = await service.until_terminal(view.session_id)
    assert final.state == "terminal"
    assert final.outcome is not None
    assert (final.outcome.kind, final.outcome.exit_code) == ("exited", 3)
    assert final.receipt_seq is not None
    page = await service.registry.receipts_page(0, 100)
    receipts = [r.receipt for r in page.receipts if r.seq == final.receipt_seq]
    assert len(receipts) == 1
    assert [r.session_id for r in page.receipts].count(view.session_id) == 1
    receipt = receipts[0]
    assert receipt["session_id"] == view.session_id
    assert receipt["plan"]["sha256"] == view.plan_sha256
    assert receipt["launch_binding"] == final.launch_binding
    assert receipt["output"]["stdout"]["bytes"] == len(b"hello\n")
    assert receipt["limits"]["wall_time"]["mechanism"] == "watchdog"
    data = service.service.paths.sessions_data / view.session_id
    assert (data / "stdout").read_bytes() == b"hello\n"
    assert (data / "stderr").read_bytes() == b"oops\n"


async def test_stop_kills_the_sandbox_and_says_cancelled(service: Running) -> None:
    """session.stop ends a running session; the receipt says cancelled."""
    view = await service.registry.create(plan("sleep"))
    queue = await service.registry.watch(view.session_id)
    while (seen := await queue.get()) is not None and seen.state != "running":
        pass
    await service.registry.stop_session(view.session_id)
    final = await service.until_terminal(view.session_id)
    assert final.outcome is not None
    assert final.outcome.kind == "cancelled"


async def test_the_receipt_journal_verifies(service: Running) -> None:
    """Two sessions, then glove journal verify's library check passes on the receipts."""
    for _ in range(2):
        view = await service.registry.create(plan("hello"))
        await service.until_terminal(view.session_id)
    paths = service.service.paths
    report = verify(paths.receipts_journal, read_key_file(paths.hmac_key))
    assert report.ok, report
