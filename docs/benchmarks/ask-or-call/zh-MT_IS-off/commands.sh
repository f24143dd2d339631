# How this folder was made: from the repository root, PYTHONPATH=.:evals, the embedded default model
# (llama.cpp, greedy; run_settings.json), official mode, on the Chinese HammerBench files: ZH is the data/zh
# folder of github.com/MadeAgents/HammerBench at commit cdbe885 (the 100-record subsets; not in this repository),
# the folder holding single-turn/ and multi-turn/ (with multi-turn/snapshot_id/, which lists the snapshots
# SO and External score). seed_unscored.py first marks the snapshots the official mode does not score as not
# run, so the model answers only the scored ones and the first. Under the model lock, at most 9 minutes a piece
# (`timeout -s INT 540`, then the same command again).
python docs/benchmarks/ask-or-call/seed_unscored.py docs/benchmarks/ask-or-call/zh-MT_IS-off HammerBench_IS 3 --data "$ZH"
hammer eval hammerbench --resume --data "$ZH" --language zh --files HammerBench_IS --limit 3 --threads 2 \
    --no-progress --on-missing call --output docs/benchmarks/ask-or-call/zh-MT_IS-off --name "default, rule off"
