# How this folder was made: from the repository root, PYTHONPATH=.:evals, the embedded default model
# (llama.cpp, greedy; run_settings.json), on the Chinese HammerBench files: ZH is the data/zh folder of
# github.com/MadeAgents/HammerBench at commit cdbe885 (the 100-record subsets; not in this repository), the
# folder holding single-turn/ and multi-turn/. Each step continues the same folder with --resume: the records
# already in predictions.jsonl are kept and only the others are asked. On the shared machine each step ran under
# the model lock in pieces of at most 9 minutes (`timeout -s INT 540`, then the same command again, --resume).
hammer eval hammerbench --data "$ZH" --language zh --files ST_Perfect --limit 20 --threads 2 --no-progress \
    --on-missing call --output docs/benchmarks/ask-or-call/zh-ST_Perfect-off --name "default, rule off"
hammer eval hammerbench --resume --data "$ZH" --language zh --files ST_Perfect --limit 60 --threads 2 --no-progress \
    --on-missing call --output docs/benchmarks/ask-or-call/zh-ST_Perfect-off --name "default, rule off"
