"""plan_digests: SHA-256 and BLAKE3 of the canonical bytes, each with its algorithm prefix."""

from __future__ import annotations

import pytest

from glove.plan import PlanDigests, canonical_bytes, decode_plan, plan_digests

from ._helpers import EXAMPLE_CANONICAL, plan_bytes


@pytest.mark.parametrize(
    ("data", "sha256", "blake3"),
    [
        (
            b"",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
        ),
        (
            b"abc",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85",
        ),
    ],
)
def test_published_vectors(data: bytes, sha256: str, blake3: str) -> None:
    """FIPS 180-2's and BLAKE3's published digests of "" and "abc", with their prefixes."""
    assert plan_digests(data) == PlanDigests(sha256=f"sha256:{sha256}", blake3=f"blake3:{blake3}")


def test_the_example_plan_digests_are_pinned() -> None:
    """The issue's example has these two digests (a change here is a format change)."""
    canonical = canonical_bytes(decode_plan(plan_bytes()))
    assert canonical == EXAMPLE_CANONICAL
    assert plan_digests(canonical) == PlanDigests(
        sha256="sha256:1e0b9df03c9966a677f9522e81bd2642465a906aef12a259aee0ed5579eb4644",
        blake3="blake3:f07175f5d687060f341fb4c404c72d150a851a17a1cefb74f883793c6c602333",
    )


def test_equivalent_plans_share_digests_and_different_ones_do_not() -> None:
    """Reformatting a plan keeps its digests; changing one limit changes both."""
    first = plan_digests(canonical_bytes(decode_plan(plan_bytes())))
    spaced = plan_digests(canonical_bytes(decode_plan(plan_bytes().replace(b", ", b" ,\n "))))
    other = plan_digests(canonical_bytes(decode_plan(plan_bytes().replace(b"64,", b"65,", 1))))
    assert first == spaced
    assert first.sha256 != other.sha256
    assert first.blake3 != other.blake3


def test_text_is_not_accepted() -> None:
    """A str has no single byte form here: passing one is a TypeError, not a digest."""
    with pytest.raises(TypeError):
        plan_digests("abc")  # type: ignore[arg-type]
