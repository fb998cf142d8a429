"""What does a reference-model checkpoint answer with? (diagnostic for issue 4)

For held-out sequences with a fixed number of records it prints how often the
greedy answer is: correct, a number stated in the context at all, the number of
the first record, the number of the last record; and how much the answer
depends on WHICH name is asked (the same context asked about each of its
records in turn). A model that retrieves answers correctly and its answer
follows the asked name; one stuck on the plateau copies some in-context
number whatever the question.

Usage::

    python benchmarks/reference_diagnose.py --model phaseaware/reference/data
    python benchmarks/reference_diagnose.py --model RUN_DIR --pool-names 16 --pool-numbers 32
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import numpy as np
import torch

from phaseaware.calibration.task import NAMES, NUMBERS, question_text
from phaseaware.reference.synth import make_example
from phaseaware.reference.tokenizer_build import ASSISTANT

RECORD = re.compile(r"for (\S+) is (\S+) \.")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", type=Path, default=Path("phaseaware/reference/data"))
    p.add_argument("--records", type=int, default=4)
    p.add_argument("--contexts", type=int, default=200)
    p.add_argument("--tokens", type=int, default=130, help="sequence length in tokens")
    p.add_argument("--pool-names", type=int, default=0, help="draw from the first N names")
    p.add_argument("--pool-numbers", type=int, default=0, help="draw from the first N numbers")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()

    from phaseaware.reference.load import load_reference

    torch.set_num_threads(1)
    model, tok = load_reference(directory=args.model)
    model.eval()
    pools = {
        "names_pool": NAMES[: args.pool_names or len(NAMES)],
        "numbers_pool": NUMBERS[: args.pool_numbers or len(NUMBERS)],
    }
    rng = np.random.default_rng(args.seed)
    counts = {"correct": 0, "in context": 0, "first record": 0, "last record": 0}
    depends, total = 0, 0
    for _ in range(args.contexts):
        e = make_example(rng, total_tokens=args.tokens, n_records=args.records, **pools)
        records = RECORD.findall(e.prompt)
        asked = next(name for name, number in records if number == e.answer)
        context = e.prompt.rsplit(f" {question_text(asked)} ", 1)[0]
        answers = {}
        for name, _number in records:
            prompt = f"{context} {question_text(name)} {ASSISTANT}"
            ids = torch.tensor([tok(prompt, add_special_tokens=False)["input_ids"]])
            with torch.no_grad():
                top = int(model(input_ids=ids).logits[0, -1].argmax())
            answers[name] = tok.convert_ids_to_tokens(top)
        numbers = [n for _, n in records]
        for name, number in records:
            guess = answers[name]
            total += 1
            counts["correct"] += guess == number
            counts["in context"] += guess in numbers
            counts["first record"] += guess == numbers[0]
            counts["last record"] += guess == numbers[-1]
        depends += len(set(answers.values())) > 1
    print(f"{args.model}: {args.contexts} contexts x {args.records} records ({total} questions)")
    for key, value in counts.items():
        print(f"  answer is {key:<14} {value / total:6.1%}")
    print(f"  chance of the first record among {args.records}: {1 / args.records:6.1%}")
    print(f"  contexts whose answer changes with the asked name: {depends / args.contexts:6.1%}")


if __name__ == "__main__":
    main()
