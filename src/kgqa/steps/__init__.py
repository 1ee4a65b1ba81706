"""Method steps shared across methods: relation search and pruning, answer generation, entity linking.

A method never imports another method; what two methods share lives here.
"""
