"""Small fake model servers, one per vendor: real HTTP, the vendor's shapes as far as the
real clients need, scripted by the test, recording what each client sent."""

from .anthropic import FakeAnthropic
from .gemini import FakeGemini
from .openai import FakeOpenAI

FAKES = {"claude": FakeAnthropic, "codex": FakeOpenAI, "gemini": FakeGemini}

__all__ = ["FAKES", "FakeAnthropic", "FakeGemini", "FakeOpenAI"]
