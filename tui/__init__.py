"""itera-tui: the control room for a rented-GPU training campaign.

The package is layered so the core (campaign, engine, bundle) stays pure Python:
see ARCHITECTURE.md, "Layers". Nothing here imports torch, textual or pynvml.
"""

__version__ = "0.1.0"
