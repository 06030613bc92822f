"""The workloads as data (docs/ARCHITECTURE.md): the scenarios, their inputs, the write ops, the churn sweep,
the load test's plans and a phase's spec."""
