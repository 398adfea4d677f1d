"""Reading campaign.toml into a frozen Plan: each section through a Reader that names the exact key, then the cross-references, every problem reported at once."""
