"""Anchors: the chain's head written to a file outside the database (`<UTC timestamp> <seq> <hash>`
per check), so events cut from the end, which leave a shorter chain that still verifies, fail a
later check: an anchored event gone, or no longer carrying the anchored hash.
"""

from __future__ import annotations

from pathlib import Path

from django.utils import timezone

from .models import AuditEvent
from .selectors import ChainReport


def anchor_check(path: Path) -> str:
    """'' when every anchored head is still in the chain, else what is wrong with the first that is not."""
    if not path.exists():
        return ""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 3 or not parts[1].isdigit():
            return f"{path}:{number}: not an anchor line ({line!r})"
        when, seq, head = parts[0], int(parts[1]), parts[2]
        if seq == 0:
            continue
        found = AuditEvent.objects.filter(seq=seq).values_list("hash", flat=True).first()
        if found is None:
            return f"event #{seq}, the head anchored at {when}, is missing: events were cut from the end"
        if found != head:
            return f"event #{seq} no longer has the hash anchored at {when}: the chain was rewritten"
    return ""


def anchor_append(path: Path, report: ChainReport) -> str:
    line = f"{timezone.now().isoformat(timespec='seconds')} {report.head_seq} {report.head_hash}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(line + "\n")
    return line
