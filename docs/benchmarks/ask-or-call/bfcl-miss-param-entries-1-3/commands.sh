# BFCL v4 multi_turn_miss_param entries 1-3 (the first, entry 0, is in ../bfcl-miss-param-call and -ask), the
# embedded default model, under the shared model lock on the 2-core machine.
# rule off: stopped after entry 3 (entry 2 took 478.54 s of invented calls), so no summary file; call_records.jsonl
# holds the three entries' records as the run wrote them.
hammer bench multi-turn --runners hammer-call,hammer-ask --categories multi_turn_miss_param --sample 4 --skip 1 \
    --threads 2 --out /tmp/mp/b1    # stopped during hammer-call's entry 4; call_records.jsonl = its records
# rule on: entries 1 and 2
hammer bench multi-turn --runners hammer-ask --categories multi_turn_miss_param --sample 2 --skip 1 --threads 2 \
    --out /tmp/mp/b3                # ask_records.jsonl, ask_multi_turn.json
