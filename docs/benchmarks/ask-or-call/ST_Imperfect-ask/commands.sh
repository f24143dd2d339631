# How this folder was made: from the repository root, PYTHONPATH=.:evals, no model. The rule-off run's raw
# answers (../ST_Imperfect-off) replayed through the engine with on_missing="ask" (replay.py first checks that
# the replay with the rule off gives the recorded predictions exactly), scored, and compared snapshot by
# snapshot (compare.json).
python docs/benchmarks/ask-or-call/replay.py docs/benchmarks/ask-or-call/ST_Imperfect-off ST_Imperfect 100 ask \
    docs/benchmarks/ask-or-call/ST_Imperfect-ask/predictions.jsonl
hammer eval hammerbench --predictions docs/benchmarks/ask-or-call/ST_Imperfect-ask/predictions.jsonl \
    --files ST_Imperfect --limit 100 --output docs/benchmarks/ask-or-call/ST_Imperfect-ask --name "default, on_missing=ask"
python docs/benchmarks/ask-or-call/compare.py docs/benchmarks/ask-or-call/ST_Imperfect-off \
    docs/benchmarks/ask-or-call/ST_Imperfect-ask
