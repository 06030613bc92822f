"""How the final restore check covers the heaviest user, read by run/restore.py (which applies it) and the
report (which states it): below both layers, so the report need not import the run layer."""

# After the backend's last writing phase the heaviest user's lookup runs fully consistent: it took Permify
# 36.8 s of make bench's 20 min (20261128-053218), after that run had measured it at 18.6 s an op. When the
# run measured that lookup slower than this an op, the user is checked instead on HEAVY_CHECKS of the
# resources they hold and as many they do not, by check: the same user's rows, in a second.
HEAVY_LOOKUP_MAX_S = 5.0
HEAVY_CHECKS = 100
