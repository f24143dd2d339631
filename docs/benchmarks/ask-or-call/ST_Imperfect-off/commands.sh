# How this folder was made: from the repository root, PYTHONPATH=.:evals, the embedded default model
# (llama.cpp, greedy; run_settings.json). Each step continues the same folder with --resume: the records
# already in predictions.jsonl are kept and only the others are asked. On the shared machine each step ran under
# the model lock in pieces of at most 9 minutes (`timeout -s INT 540`, then the same command again, --resume).
hammer eval hammerbench --files ST_Imperfect --limit 25 --threads 2 --no-progress --on-missing call \
    --output docs/benchmarks/ask-or-call/ST_Imperfect-off --name "default, rule off"
hammer eval hammerbench --resume --files ST_Imperfect --limit 60 --threads 2 --no-progress --on-missing call \
    --output docs/benchmarks/ask-or-call/ST_Imperfect-off --name "default, rule off"
hammer eval hammerbench --resume --files ST_Imperfect --limit 100 --threads 2 --no-progress --on-missing call \
    --output docs/benchmarks/ask-or-call/ST_Imperfect-off --name "default, rule off"
