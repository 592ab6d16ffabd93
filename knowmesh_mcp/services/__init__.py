"""The service layer: the one place every interface calls (`service.Service`), one module per concern
(reading, publishing, editing, outcomes, syncing, maintenance, tokens, health).
"""
