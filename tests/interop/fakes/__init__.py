"""Small fake model servers, one per vendor: real HTTP, the vendor's shapes as far as the
real clients need, scripted by the test, recording what each client sent."""
