package sandbox

import (
	"github.com/paysync/paysync"
)

// Fixture IDs. They are opaque to clients, like Danløn's: the standard
// base64 encoding of "1_1", "1_1_1" and so on.
const (
	CompanyNordlys   = "MV8x" // "1_1" Nordlys ApS, owned by the fixture user
	CompanyFjordtech = "MV8y" // "1_2" Fjordtech A/S, owned by the fixture user
	CompanyHavblik   = "MV8z" // "1_3" Havblik I/S, owned by "other"

	EmpMetteHansen    = "MV8xXzE=" // "1_1_1"
	EmpLarsNielsen    = "MV8xXzI=" // "1_1_2"
	EmpSofieJensen    = "MV8xXzM=" // "1_1_3"
	EmpAndersPedersen = "MV8xXzQ=" // "1_1_4"

	EmpJonasLarsen     = "MV8yXzE=" // "1_2_1"
	EmpEmmaChristensen = "MV8yXzI=" // "1_2_2"
	EmpPeterMadsen1    = "MV8yXzM=" // "1_2_3"
	EmpPeterMadsen2    = "MV8yXzQ=" // "1_2_4": same name as EmpPeterMadsen1, on purpose
	EmpIdaPoulsen      = "MV8zXzE=" // "1_3_1"
	otherUsername      = "other"
	otherPassword      = "other"
)

// FixtureMeta returns the pay codes every fixture company accepts, with
// their true field rules, in the order pay_parts_meta serves them.
func FixtureMeta() []paysync.PayPartMeta {
	const (
		m = paysync.RuleMandatory
		o = paysync.RuleOptional
		f = paysync.RuleForbidden
	)
	return []paysync.PayPartMeta{
		{Code: "T1", Description: "Timeløn (hourly wage)", Units: m, Rate: o, Amount: f},
		{Code: "T2", Description: "Overtid 50%", Units: m, Rate: m, Amount: f},
		{Code: "T3", Description: "Overtid 100%", Units: m, Rate: m, Amount: f},
		{Code: "TILLAEG", Description: "Aftentillæg (evening supplement)", Units: o, Rate: o, Amount: m},
		{Code: "KM", Description: "Kørselsgodtgørelse (mileage, statutory rate)", Units: m, Rate: f, Amount: f},
		{Code: "BONUS", Description: "Bonus", Units: f, Rate: f, Amount: m},
		{Code: "FERIE", Description: "Feriefridage (days off)", Units: m, Rate: f, Amount: f},
		{Code: "DIAET", Description: "Diæter (per diem)", Units: m, Rate: o, Amount: o},
		{Code: "SYG", Description: "Sygdom (sick hours)", Units: m, Rate: o, Amount: f},
	}
}

// fixtureCompanies returns a fresh copy of the fixture companies; the two
// payroll companies of the fixture user are owned by fixtureUser. Every
// employee has a distinct number (served as Options.EmployeeNumberField);
// Anders Pedersen and the second Peter Madsen have no e-mail.
func fixtureCompanies(fixtureUser string) []*company {
	return []*company{
		{
			id: CompanyNordlys, name: "Nordlys ApS", owner: fixtureUser,
			employees: []paysync.Employee{
				{ID: EmpMetteHansen, Name: "Mette Hansen", Number: "10", Email: "mette.hansen@nordlys.dk"},
				{ID: EmpLarsNielsen, Name: "Lars Nielsen", Number: "11", Email: "lars.nielsen@nordlys.dk"},
				{ID: EmpSofieJensen, Name: "Sofie Jensen", Number: "12", Email: "sofie.jensen@nordlys.dk"},
				{ID: EmpAndersPedersen, Name: "Anders Pedersen", Number: "13"},
			},
		},
		{
			id: CompanyFjordtech, name: "Fjordtech A/S", owner: fixtureUser,
			employees: []paysync.Employee{
				{ID: EmpJonasLarsen, Name: "Jonas Larsen", Number: "20", Email: "jonas.larsen@fjordtech.dk"},
				{ID: EmpEmmaChristensen, Name: "Emma Christensen", Number: "21", Email: "emma.christensen@fjordtech.dk"},
				{ID: EmpPeterMadsen1, Name: "Peter Madsen", Number: "22", Email: "peter.madsen@fjordtech.dk"},
				{ID: EmpPeterMadsen2, Name: "Peter Madsen", Number: "23"},
			},
		},
		{
			id: CompanyHavblik, name: "Havblik I/S", owner: otherUsername,
			employees: []paysync.Employee{
				{ID: EmpIdaPoulsen, Name: "Ida Poulsen", Number: "30", Email: "ida.poulsen@havblik.dk"},
			},
		},
	}
}
