module modelplane.local/callerauth

go 1.22
