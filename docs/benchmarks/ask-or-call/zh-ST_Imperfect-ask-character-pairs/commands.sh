# How this folder was made (no model): as ../zh-ST_Imperfect-ask, on commit 8292846, whose grounding check read a
# run of Chinese characters as its character pairs (reverted after this record: see docs/slot_filling.md).
python docs/benchmarks/ask-or-call/replay.py docs/benchmarks/ask-or-call/zh-ST_Imperfect-off ST_Imperfect 40 ask \
    docs/benchmarks/ask-or-call/zh-ST_Imperfect-ask-character-pairs/predictions.jsonl --data "$ZH"
hammer eval hammerbench --predictions docs/benchmarks/ask-or-call/zh-ST_Imperfect-ask-character-pairs/predictions.jsonl \
    --data "$ZH" --language zh --files ST_Imperfect --limit 40 --output docs/benchmarks/ask-or-call/zh-ST_Imperfect-ask-character-pairs \
    --name "default, on_missing=ask, Chinese matched by character pairs (not adopted)"
python docs/benchmarks/ask-or-call/compare.py docs/benchmarks/ask-or-call/zh-ST_Imperfect-off \
    docs/benchmarks/ask-or-call/zh-ST_Imperfect-ask-character-pairs
