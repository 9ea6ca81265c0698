"""The bottom layer: errors, settings, target descriptions, kernel options,
argument types and the binding interface. Imports nothing else of ours."""
