"""`--backend NAME@vX.Y.Z`, checked before anything starts: the label's form (a release tag), that its system
has a versioned build (its declaration's `versioned`), that it runs natively, and that the Go module proxy
serves the release (gobuild.not_served). Called by config.ServerChoice.validate."""

from __future__ import annotations

from authzbench.core.errors import UserError
from authzbench.systems import VERSION, load, split, system, systems


def check_labels(labels: list[str], provision: str) -> None:
    """Every label's form first, so a typo in the second is not preceded by a module lookup for the first."""
    for label in labels:
        check_label(label, provision)


def check_label(label: str, provision: str) -> None:
    """NAME@VERSION: a release tag (vX.Y.Z) of a system with a versioned build, built natively; one line
    otherwise, before anything starts."""
    name, version = split(label)
    if "@" not in label:
        return
    if not VERSION.fullmatch(version):
        raise UserError(f"--backend {label}: a version is a release tag vX.Y.Z (e.g. v1.57.1), "
                        f"got {version!r}")
    if not system(name).versioned:
        some = ", ".join(n for n, s in systems().items() if s.versioned)
        raise UserError(f"--backend {label}: {name} has no versioned build (NAME@VERSION is for {some})")
    if provision != "native":
        raise UserError(
            f"--backend {label}: a version is built here, so it runs with --provision native only")


def check_served(labels: list[str]) -> None:
    """Every NAME@VERSION served by the Go module proxy (or already built): asked after every label's form is
    checked and before any build starts (provision/gobuild.not_served)."""
    from authzbench.provision.gobuild import not_served

    for label in labels:
        name, version = split(label)
        if version and (why := not_served(load(system(name).versioned)(version))):
            raise UserError(f"--backend {label}: {why}")
