# How this folder was made: from the repository root, PYTHONPATH=.:evals, no model. The rule-off run's raw
# answers (../zh-ST_Perfect-off) replayed through the engine with on_missing="ask" (replay.py first checks that
# the replay with the rule off gives the recorded predictions exactly), scored, and compared snapshot by
# snapshot (compare.json). ZH: the data/zh folder of github.com/MadeAgents/HammerBench at commit cdbe885.
python docs/benchmarks/ask-or-call/replay.py docs/benchmarks/ask-or-call/zh-ST_Perfect-off ST_Perfect 60 ask \
    docs/benchmarks/ask-or-call/zh-ST_Perfect-ask/predictions.jsonl --data "$ZH"
hammer eval hammerbench --predictions docs/benchmarks/ask-or-call/zh-ST_Perfect-ask/predictions.jsonl --data "$ZH" --language zh \
    --files ST_Perfect --limit 60 --output docs/benchmarks/ask-or-call/zh-ST_Perfect-ask --name "default, on_missing=ask"
python docs/benchmarks/ask-or-call/compare.py docs/benchmarks/ask-or-call/zh-ST_Perfect-off \
    docs/benchmarks/ask-or-call/zh-ST_Perfect-ask
