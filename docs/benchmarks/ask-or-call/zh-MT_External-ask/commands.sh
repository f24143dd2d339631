# How this folder was made: from the repository root, PYTHONPATH=.:evals, no model. The rule-off run's raw
# answers (../zh-MT_External-off) replayed through the engine with on_missing="ask" (replay.py first checks that
# the replay with the rule off gives the recorded predictions exactly; snapshots marked as not run stay so),
# scored in official mode, and compared snapshot by snapshot (compare.json). ZH: as in ../zh-MT_External-off.
python docs/benchmarks/ask-or-call/replay.py docs/benchmarks/ask-or-call/zh-MT_External-off HammerBench_External 3 ask \
    docs/benchmarks/ask-or-call/zh-MT_External-ask/predictions.jsonl --data "$ZH"
hammer eval hammerbench --predictions docs/benchmarks/ask-or-call/zh-MT_External-ask/predictions.jsonl --data "$ZH" --language zh \
    --files HammerBench_External --limit 3 --output docs/benchmarks/ask-or-call/zh-MT_External-ask --name "default, on_missing=ask"
python docs/benchmarks/ask-or-call/compare.py docs/benchmarks/ask-or-call/zh-MT_External-off \
    docs/benchmarks/ask-or-call/zh-MT_External-ask
