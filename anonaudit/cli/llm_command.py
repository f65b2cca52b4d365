"""``anonaudit llm chat``: talk to the configured LLM (a smoke test)."""

from __future__ import annotations

import logging

import click

from anonaudit.cli.common import llm_option, no_cache_option
from anonaudit.cli.param_options import FINITE_FLOAT


@click.group("llm")
def llm_group() -> None:
    """Talk to the configured LLM (a smoke test)."""


@llm_group.command("chat")
@click.argument("prompt")
@llm_option
@click.option("--system", default=None, help="A system message.")
@click.option("--max-tokens", type=click.IntRange(1, 1_000_000), default=256, show_default=True,
              help="Most tokens in the answer.")
@click.option("--temperature", type=FINITE_FLOAT, default=0.0, show_default=True,
              help="Sampling temperature (0: the most likely answer).")
@click.option("--seed", type=int, default=0, show_default=True)
@no_cache_option
def llm_chat(prompt: str, llm_spec: str | None, system: str | None, max_tokens: int, temperature: float,
             seed: int, no_cache: bool) -> None:
    """Send PROMPT to the LLM and print its answer (cache statistics with -v)."""
    if not 0.0 <= temperature <= 10.0:
        raise click.BadParameter(f"{temperature} is not between 0 and 10", param_hint="--temperature")
    from audit.models.specs import load_llm

    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    with load_llm(llm_spec, cache=not no_cache, n_parallel=1) as llm:
        answer = llm.complete(messages, max_tokens=max_tokens, temperature=temperature, seed=seed)
        click.echo(answer)
        logging.getLogger("audit.models.llm").info("model %s; cache %s", llm.identity, llm.stats)


COMMANDS = [llm_group]
