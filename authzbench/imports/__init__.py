"""Reading graphs someone else produced into the suite's dataset format (issue 69).

Every reader yields `Edge`s in the model's own relation names (`edges.Edge`); one writer turns them into the
Parquet + manifest the generator writes, so backends, scenarios, the oracle and the report read them
unchanged.
"""
