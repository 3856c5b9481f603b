"""The daemon and what a person sets up: wiring, control API, configuration, install."""
