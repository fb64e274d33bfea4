module modelplane.local/kvroute

go 1.22
