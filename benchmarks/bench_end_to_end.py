"""End to end: does scoring hide behind generation?

    python benchmarks/bench_end_to_end.py [--prompts 24] [--samples 5] [--latency 1.0]
                                          [--concurrency 24] [--rounds 3]

Starts an OpenAI-compatible server on 127.0.0.1 that answers every call after a fixed latency with
realistic LLM passages (the shared WikiBio answers and samples when present, generated passages
otherwise), and drives it through ``langchain_openai.ChatOpenAI`` and ``BlackBoxUQ``. Measures

- generation only: ``generate_and_score`` with a scorer that does no work,
- scoring only: ``BlackBoxUQ.score`` on the same answers with ``bert_score``,
- both: ``generate_and_score`` with ``bert_score``,

and reports ``both / max(generation only, scoring only)``: 1.0 means scoring is completely
hidden behind generation (or the other way round), 2.0 means they ran one after the other.
The server binds the loopback interface only and stops when the benchmark ends.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
import time
import warnings
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import load_prompts, median  # noqa: E402


class PassageServer:
    """Answers prompt i with passage i at temperature 0 and with its samples in turn otherwise."""

    def __init__(self, responses: list[str], samples: list[list[str]], latency: float) -> None:
        self.responses, self.samples, self.latency = responses, samples, latency
        self.counter: dict[int, int] = defaultdict(int)
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                prompt = body["messages"][-1]["content"]
                i = int(prompt.split("#")[1])
                time.sleep(server.latency)
                if not body.get("temperature"):
                    text = server.responses[i]
                else:
                    with server.lock:
                        j = server.counter[i] % len(server.samples[i])
                        server.counter[i] += 1
                    text = server.samples[i][j]
                payload = json.dumps(
                    {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": "m",
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": text},
                            }
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> PassageServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=24)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--latency", type=float, default=1.0)
    ap.add_argument("--concurrency", type=int, default=24)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    warnings.simplefilter("ignore")

    from langchain_openai import ChatOpenAI

    from uqlm_bert import BlackBoxUQ
    from uqlm_bert.scorers import Scorer

    class NoWork(Scorer):
        name = "no_work"

        def score(self, responses, sampled_responses, show_progress_bars=False):
            return np.zeros(len(responses))

    responses, samples, source = load_prompts(args.prompts, args.samples)
    prompts = [f"Passage #{i}# please." for i in range(len(responses))]
    times: dict[str, list[float]] = defaultdict(list)
    with PassageServer(responses, samples, args.latency) as server:
        llm = ChatOpenAI(model="m", base_url=server.base_url, api_key="local", temperature=0.0)
        common = dict(max_concurrency=args.concurrency, show_progress_bars=False)
        gen = BlackBoxUQ(llm=llm, scorers=[NoWork()], **common)
        both = BlackBoxUQ(llm=llm, scorers=["bert_score"], **common)
        both.score(responses[:2], [s[:2] for s in samples[:2]])  # load the model once
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            res = asyncio.run(gen.generate_and_score(prompts, num_responses=args.samples))
            times["generation only"].append(time.perf_counter() - t0)
            df = res.to_df()
            t0 = time.perf_counter()
            both.score(list(df["response"]), list(df["sampled_responses"]))
            times["scoring only"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            out = asyncio.run(both.generate_and_score(prompts, num_responses=args.samples))
            times["generation and scoring"].append(time.perf_counter() - t0)
            assert out.to_df()["bert_score"].notna().all()
    med = {k: median(v) for k, v in times.items()}
    bound = max(med["generation only"], med["scoring only"])
    print("## End to end: generate_and_score against a loopback server\n")
    print(
        f"- {len(prompts)} prompts x {args.samples} samples ({source}); fixed latency "
        f"{args.latency:.2f} s per call; max_concurrency {args.concurrency}; "
        f"{args.rounds} rounds, medians\n"
    )
    print("| run | median s |")
    print("|---|---|")
    for k, v in med.items():
        print(f"| {k} | {v:.2f} |")
    print(
        f"\nboth / max(generation only, scoring only) = {med['generation and scoring'] / bound:.3f}"
    )


if __name__ == "__main__":
    main()
