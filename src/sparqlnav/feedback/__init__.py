"""ERASER-style feedback: detectors over the environment and the catalogue of guidelines they pick."""
