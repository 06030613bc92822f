"""Ory Keto (REST over plain HTTP), a Zanzibar engine, on a private PostgreSQL natively; rebac only."""

from authzbench.systems.contract import POSTGRES_SERVER, REBAC, Build, Claim, System

TEST = "tests/backends/test_keto.py"
NATIVE = "authzbench.systems.keto.native"

SYSTEM = System(
    name="keto", adapter="authzbench.systems.keto.adapter:KetoBackend", native=NATIVE,
    models=REBAC, drivers=("urllib3", "psycopg"), extra="keto", services=("keto",),
    builds=(POSTGRES_SERVER, Build("keto (go build)", f"{NATIVE}:binary", f"{NATIVE}:built", "~1-3 min"),),
    tiers=f"{NATIVE}:tier", colour=11, order=11, aliases=("Ory Keto", "Keto"),
    no_lookup="Keto v0.13 has no reverse lookup: its API lists relation tuples and expands an object's "
              "subjects, never the objects a subject can reach",
    claims=(
        Claim("consistency tokens", False, "none: the check API's snaptoken fields are not implemented "
              "(v0.13); every check reads the latest committed tuples, so a write is seen by the next check",
              f"{TEST}::test_a_write_is_seen_by_the_next_check_and_no_check_answer_carries_a_token"),
        Claim("watch / change stream", False, "none: v0.13 serves check, expand, list, write and namespaces "
              "APIs, no watch", f"{TEST}::test_the_server_offers_no_watch_and_no_reverse_lookup"),
        Claim("wildcards", False, "none: a subject id of * is a literal id, it grants no one else",
              f"{TEST}::test_a_star_subject_grants_no_one_else"),
        Claim("conditions", False, "none: the permission language has no conditions or request context"),
        Claim("schema change without a reload", True, "the namespaces file is watched: an edited OPL file is "
              "served without a restart (namespaces.location file://...)",
              f"{TEST}::test_an_edited_model_file_is_served_without_a_restart"),
    ),
)
