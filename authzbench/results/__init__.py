"""The results store (docs/ARCHITECTURE.md): results/<run-id>/{manifest.json, records.jsonl}."""
