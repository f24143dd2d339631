# How this folder was made: from the repository root, PYTHONPATH=.:evals, no model. The rule-off run's raw
# answers (../zh-MT_SO-off) replayed through the engine with on_missing="ask" (replay.py first checks that
# the replay with the rule off gives the recorded predictions exactly; snapshots marked as not run stay so),
# scored in official mode, and compared snapshot by snapshot (compare.json). ZH: as in ../zh-MT_SO-off.
python docs/benchmarks/ask-or-call/replay.py docs/benchmarks/ask-or-call/zh-MT_SO-off HammerBench_SO_case1,HammerBench_SO_case2 3 ask \
    docs/benchmarks/ask-or-call/zh-MT_SO-ask/predictions.jsonl --data "$ZH"
hammer eval hammerbench --predictions docs/benchmarks/ask-or-call/zh-MT_SO-ask/predictions.jsonl --data "$ZH" --language zh \
    --files HammerBench_SO_case1 HammerBench_SO_case2 --limit 3 --output docs/benchmarks/ask-or-call/zh-MT_SO-ask --name "default, on_missing=ask"
python docs/benchmarks/ask-or-call/compare.py docs/benchmarks/ask-or-call/zh-MT_SO-off \
    docs/benchmarks/ask-or-call/zh-MT_SO-ask
